# figures: see issue 5
