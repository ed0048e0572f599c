"""A model folder as the kit reads it: one digest for the whole folder (``modeldigest``), what its config says
of its vocabulary and context (``modelconfig``), its weights in the safetensors format (``safetensors_io``) and
the provenance a fault copy of it carries and a case run on such a copy (``faultcopy``), and a fixture made with
its tokenizer or checked against it (``tokenizer``).

Apart from the records because a model folder is the user's, not the kit's: the kit names it by digest and reads
it, and writes one only as a fault copy.
"""
