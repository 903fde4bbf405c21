"""AdmissionReview on the wire: the parsed request, the fast reader, the encoder, decisions already
made."""
