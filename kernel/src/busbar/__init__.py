"""Busbar: an LLM control plane. See README.md; the kernel's modules map onto seed 001's sections."""
__version__ = "1.5.0"
