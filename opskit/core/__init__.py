"""Pure domain logic: stdlib only, no I/O, no clock, no env."""
