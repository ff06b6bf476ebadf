"""The class page of a batch (`OUT/index.html`), in three layers that can be read apart:

- `summary`: the numbers, pure (reports in, pydantic models out), so they are tested without HTML;
- `analysis`: what the class got wrong, pure too: per check, the failures grouped by message and by
  compiled program (also `grade report OUT --json`);
- `markup`: the small escaped pieces (text, links, a student's name, a meter, the histogram);
- `page`: the page itself, section by section, with the inline style and script of `assets`.

`grader.outputs.classreport` is the entry point (`write_class_report`) that the batch and `grade export` call.
"""
