"""The analyser: CSR setup, DMA bursts and transfers, per-packet timing, occupancy, coalescence, gaps.

Pure functions over decode records (docs/records.md); see docs/report-schema.md for every
definition. ``analyse(decode_result, options) -> Analysis``; ``analyse_bus(records, facts, bars,
options) -> BusAnalysis`` for one bus's records.
"""

from pcitrace.analyse.analysis import (PACKET_FIGURES, Analysis, AnalysisOptions, BusAnalysis,  # noqa: F401
                                       analyse, analyse_bus)
from pcitrace.analyse.classify import CLASS_NAMES, CSR, DMA, OTHER, classify  # noqa: F401
from pcitrace.analyse.stats import Distribution, Histogram  # noqa: F401

__all__ = ["analyse", "analyse_bus", "Analysis", "AnalysisOptions", "BusAnalysis",
           "Distribution", "Histogram", "classify", "CSR", "DMA", "OTHER", "CLASS_NAMES", "PACKET_FIGURES"]
