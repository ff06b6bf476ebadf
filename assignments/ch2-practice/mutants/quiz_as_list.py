# fails: quiz.q1, quiz.q2, quiz.q3, quiz.q4, quiz.q6, quiz.q7, quiz.q8
# the right answers in a list, not a dict keyed 1..8: answer k is read at index k, one place off (and 8 is missing).
quiz_answers = ["B", "C", "B", "C", "B", "B", "D", "C"]
