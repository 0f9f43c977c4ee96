"""Subject-based routing: the subscription index and message fan-out."""
