# A two-layer network on a batch: 8 rows of 4 features, 3 classes, ReLU, softmax cross-entropy.
# The data is constant (const): only the parameters W1 b1 W2 b2 are differentiated.
const X = [[0.5, -1.2, 0.3, 2.0], [1.5, 0.2, -0.7, 0.1], [-0.3, 0.8, 1.1, -1.4], [0.9, -0.5, 0.0, 0.6],
           [-1.1, 1.3, -0.2, 0.4], [0.2, 0.1, 1.8, -0.9], [1.0, -1.0, 0.5, 0.5], [-0.6, 0.7, -1.5, 1.2]]
const Y = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0]]
const N = 8
W1 = [[0.2, -0.4, 0.1, 0.5, -0.3], [0.7, 0.1, -0.6, 0.2, 0.4], [-0.5, 0.3, 0.2, -0.1, 0.6], [0.1, 0.8, -0.2, 0.3, -0.7]]
b1 = [0.1, 0, -0.1, 0.2, 0]
W2 = [[0.3, -0.2, 0.5], [-0.4, 0.6, 0.1], [0.2, 0.2, -0.5], [0.5, -0.3, 0.4], [-0.1, 0.4, 0.2]]
b2 = [0, 0.1, -0.1]

# cross-entropy of softmax, written out: log-sum-exp of the scores minus the right class's score
xent(s, y) { z = s - max(s, 1, True); return sum(log(sum(exp(z), 1)) - sum(y * z, 1)) / N }

h = relu(X @ W1 + b1)
s = h @ W2 + b2
L = xent(s, Y)
