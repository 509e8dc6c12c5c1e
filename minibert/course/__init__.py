"""Course tools: grading (nbgrader), slides (reveal.js) and the student release zip."""
