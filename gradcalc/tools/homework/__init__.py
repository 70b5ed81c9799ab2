"""Homework: judging a student's claims against a program (check) and grading a class's submissions (grading)."""
