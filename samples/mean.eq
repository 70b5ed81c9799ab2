# Seed example 3: out = mean(3 (x + 2)^2); every entry of ∂out/∂x is 3/2 (x + 2) / ... = 4.5 at x = 1.
x = ones(2, 2)
y = x + 2
z = y * y * 3
out = mean(z)
