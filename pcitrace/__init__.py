"""pcitrace: PCI / PCI-X logic-analyser captures to transactions and timing figures."""

from pcitrace.errors import PcitraceError

__version__ = "0.1.0"
__all__ = ["PcitraceError", "__version__"]
