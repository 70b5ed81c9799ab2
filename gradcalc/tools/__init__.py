"""Built on a `Run`: gradcheck (autograd against finite differences) and homework (judging claims, grading)."""
