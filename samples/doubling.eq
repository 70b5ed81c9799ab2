# Seed example 4: a loop whose trip count depends on the data (PyTorch's dynamic graph).
# gradcalc grad samples/doubling.eq --of y --wrt x --vector '[0.1, 1.0, 0.0001]'
x = [-0.9618, -3.3220, -0.6637]
y = x * 2
while norm(y) < 1000 {
    y = y * 2
}
