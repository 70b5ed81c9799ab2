# The toy network as a graded homework: what is asked, and what it is worth.
a = 2; w1 = 3; w2 = -1; w3 = 0.5; w4 = 4
b = w1*a
c = w2*a
d = w3*b + w4*c
L = 10 - d

check dL/dw1 points 2
check dL/da points 2
check dL/dd
