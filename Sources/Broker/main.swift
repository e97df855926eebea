print("broker")
