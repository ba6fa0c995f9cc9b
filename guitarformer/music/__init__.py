"""What the data is: a guitar part (GuitarScore) and the facts of the instrument."""
