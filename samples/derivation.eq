# A derivation handed in line by line: each line that starts with `=` is the next step, checked against
# the one before (gradcalc check samples/derivation.eq); the last line is the answer.
x = 0.7
y = x^2*sin(x)

check dy/dx = x^2 cos(x) + 2x sin(x)
      = x (x cos(x) + 2 sin(x))
      = 2x sin(x)
