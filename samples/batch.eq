# Softmax cross-entropy averaged over a batch of 4: the batch size and the labels are data (const).
const N = 4
const Y = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 1, 0]]
scores = [[2.0, 1.0, 0.1], [0.5, 2.5, 0.3], [1.2, 0.2, 3.0], [0.1, 0.4, 0.9]]
p = softmax(scores)
L = -sum(Y * log(p)) / N

check dL/dscores = (p - Y)/N
check dL/dscores = (p - Y)/4    # right too: a constant keeps its value at the nearby points
