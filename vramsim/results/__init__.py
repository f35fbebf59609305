"""The results of vramsim: frozen records, no tensors, nothing printed."""
