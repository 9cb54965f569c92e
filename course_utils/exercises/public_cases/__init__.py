"""The public cases of every exercise, one module per chapter, one ``PublicCases`` per exercise
under the exercise's name (``course_utils.exercises.public`` says what they are for).

These modules ship in exam releases: they build inputs and use the learner's answer on them,
and never compute what a right answer gives.
"""
