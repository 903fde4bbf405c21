"""Reading what a legacy HAMi manifest asks: resources, annotations, selectors."""
