"""Reading geometry: the real library's io package imports its dataframe stack here too."""
