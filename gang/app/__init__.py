"""Entry-point assembly: the running scheduler process and its task supervision."""
