"""Showing results: terminal tables, plots, the HTML report."""
