"""Bits of a field's flags in the generated table (shared by the generator and the codec)."""

REPEATED = 1  # a repeated field: a JSON list
MAP = 2  # a map<key, value>: a JSON object
POINTER = 4  # a Go pointer: present on the wire only when set, so zero values are kept (proto2 presence)
OMITEMPTY = 8  # `json:",omitempty"`: a zero value is left out of the JSON
INLINE = 16  # an embedded Go struct: its fields are the parent's JSON fields
