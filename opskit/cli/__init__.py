"""Typer commands: parse, call, render. The only layer that exits."""
