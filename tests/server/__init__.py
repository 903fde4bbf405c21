"""The HTTPS server: endpoints, hardening, fuzzing, certificates, the serve shell."""
