# fails: quiz.q1, quiz.q2, quiz.q5, quiz.q7, quiz.q8
# the quiz with wrong answers to questions 1, 2, 5, 7 and 8 (right ones, in lower case and with spaces, elsewhere).
quiz_answers = {1: "A", 2: "A", 3: " b", 4: "c ", 5: "A", 6: "b", 7: "C", 8: "A"}
