# A 2-link arm: the hand at angles t1, t2 with links l1, l2; L, its squared distance from the target (1, 0.5).
l1 = 1
l2 = 0.8
t1 = 0.3
t2 = 0.5
x = l1*cos(t1) + l2*cos(t1 + t2)
y = l1*sin(t1) + l2*sin(t1 + t2)
L = (x - 1)^2 + (y - 0.5)^2
