"""Built-in toolsets, made of plain `@tool` functions."""
