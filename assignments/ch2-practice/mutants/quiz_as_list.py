# fails: quiz.form, quiz.q1, quiz.q2, quiz.q3, quiz.q4, quiz.q5, quiz.q6, quiz.q7, quiz.q8
# the right answers in a list, not the dict keyed 1..8 the text asks for: the wrong form, so no question is judged.
quiz_answers = ["B", "C", "B", "C", "B", "B", "D", "C"]
