"""The grading vertical's simulator: procedural photo scenes (`scenes`), creators with
a hidden colour taste (`creator`), and a platform export of their retouch, selection
and rating logs with the image files (`platform`)."""
