# fails: quiz.q3, quiz.q4, quiz.q6
# the quiz answered as if static arguments fixed everything: an if on x.ndim fails (3A), static threshold (4A), static n (6A).
quiz_answers = {1: "B", 2: "C", 3: "A", 4: "A", 5: "B", 6: "A", 7: "D", 8: "C"}
