set pagination off
break tick
run 3
continue
continue
info registers rip rsp rbp
info proc mappings
bt
x/64gx $sp
kill
quit
