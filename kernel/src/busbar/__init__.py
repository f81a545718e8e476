"""Busbar: an LLM control plane. See README.md; the kernel's modules map onto the config sections of
docs/configuration.md."""
__version__ = "1.5.0"
