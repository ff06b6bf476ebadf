"""Tools for a course's authors and CI: validate, the pytest plugin, the student pack, mutants."""
