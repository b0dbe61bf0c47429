print('flows in python are not read here')
