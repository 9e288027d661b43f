print("eventkernel: not built yet")
