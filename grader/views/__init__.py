"""What a student (or an instructor) reads of a report: the terminal summary (`terminal`) and the
feedback page handed back (`page`). Both render `grader.report.Report` and nothing else, with every
string a student controls rendered inert (`grader.inert`)."""
