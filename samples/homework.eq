# A student's homework: the toy network, and the gradients derived by hand.
a = 2; w1 = 3; w2 = -1; w3 = 0.5; w4 = 4
b = w1*a
c = w2*a
d = w3*b + w4*c
L = 10 - d

check dL/dd = -1
check dL/db = -w3
check dL/dw1 = -w3*a
check dL/dw2 = -4*a       # right at these values only: w4 = 4 happens to be 4
check dL/da = -w3*w1      # one chain-rule path is missing
