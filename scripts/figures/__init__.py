"""Programs that make the docs' pictures, each named by the doc that shows it."""
