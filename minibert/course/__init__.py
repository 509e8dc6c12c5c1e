"""Course tools: slides (reveal.js), the student release zip, the capstone's loader and the exercises' integrity
guards. The grader is `minibert.grading`."""
