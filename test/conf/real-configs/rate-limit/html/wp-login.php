login page
