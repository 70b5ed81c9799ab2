# The toy network with 3×3 tensors (seed example 2): every gradient is 3×3.
# L = 10 - d is a tensor, so `gradcalc grad` needs --vector ones (or write L = sum(10 - d)).
a = randn(3, 3)
w1 = randn(3, 3); w2 = randn(3, 3); w3 = randn(3, 3); w4 = randn(3, 3)
b = w1*a
c = w2*a
d = w3*b + w4*c
L = 10 - d
