"""In-tree plugins, one module each, named and behaving as upstream's."""
