module gobench

go 1.19
