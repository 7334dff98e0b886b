module corpus

go 1.27
