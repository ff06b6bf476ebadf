# fails: detective.form, detective.call_1, detective.call_2, detective.call_3, detective.call_4, detective.call_5, detective.call_6, detective.call_7, detective.call_8
# predictions holds 7 values (call 8 left out): not the form the exercise asks for, so none of the eight calls is judged.
predictions = list(predictions)[:7]
