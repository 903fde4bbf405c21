"""The admission use case: an AdmissionReview in, its answer out."""
