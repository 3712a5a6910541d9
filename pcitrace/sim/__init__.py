"""The simulator: a NIC + host + link model that writes captures together with their truth.

- :mod:`pcitrace.sim.scenario`: scenario TOML (documented there), ``load_scenario(path)``,
  ``simulate(scenario) -> SimResult(capture, profile, truth)``, ``write_outputs(result, path)``.
- :mod:`pcitrace.sim.model`: the discrete-event model (applications, drivers, NIC DMA engines,
  interrupt coalescence, arbitration, Ethernet link with pause frames and loss).
- :mod:`pcitrace.sim.bus`: the cycle-accurate bus renderer (TxnSpec, render);
  :mod:`pcitrace.sim.specs` turns the model's transactions into TxnSpecs.
- :mod:`pcitrace.sim.output`: capture sampling (timing / state), probe lines, profile and truth.
- :mod:`pcitrace.sim.strategies`: hypothesis strategies for the decoders' tests.
- :mod:`pcitrace.sim.samples`: regenerates the bundled samples (``python -m pcitrace.sim.samples``).
"""

from pcitrace.sim.scenario import Scenario, load_scenario, scenario_from_dict, simulate, write_outputs

__all__ = ["Scenario", "load_scenario", "scenario_from_dict", "simulate", "write_outputs"]
