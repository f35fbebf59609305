"""Model -> Program: the model built on meta, its batch, loss, optimizer and step, ready for the tracer."""
